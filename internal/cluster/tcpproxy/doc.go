// Package tcpproxy is the layer-4 proxy behind `metastore gateway start`,
// the counterpart of `etcd gateway start`: it accepts TCP connections and
// splices each one, byte for byte, to one of the cluster's client
// endpoints. It does not look inside the stream, so gRPC, HTTP and TLS
// pass through unchanged and the member sees the client's own TLS
// handshake and certificate.
//
// Each new connection goes to an active endpoint of the best SRV priority
// class (the lowest Priority): chosen at random in proportion to Weight
// when the class has weighted records (RFC 2782), otherwise round-robin
// in the order the endpoints were given. Endpoints built from
// --endpoints have priority and weight 0, so the gateway cycles through
// them in order.
//
// An endpoint that refuses a dial is marked inactive and the connection
// tries the next one; the client never sees the failure unless every
// endpoint is inactive, in which case its connection is closed. An
// inactive endpoint is dialed again RetryDelay after it failed, and every
// RetryDelay after that until it answers, when it rejoins the rotation.
//
// Discover reads the endpoints from DNS SRV records as etcd's gateway
// does (--discovery-srv): _etcd-client-ssl._tcp and _etcd-client._tcp
// under the domain, with an optional -<name> suffix.
package tcpproxy
