// Package wiretest holds the checks shared by the tests of the
// hand-written gRPC message packages (v3lockpb, v3electionpb): that each
// message encodes byte for byte as etcd's generated code does, and that
// whatever bytes decode survive a marshal/unmarshal round trip (the body
// of their fuzz targets). It is imported by tests only.
package wiretest
