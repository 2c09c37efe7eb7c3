package membership

import "testing"

// FuzzDecodeMembers: /members answers come from the network; decoding
// never panics and accepts only complete member lists.
func FuzzDecodeMembers(f *testing.F) {
	f.Add("77", []byte(`[{"id":1,"name":"m0","peerURLs":["http://a:2380"],"clientURLs":["http://a:2379"]}]`))
	f.Add("", []byte(`[]`))
	f.Add("zz", []byte(`{`))
	f.Add("1", []byte(`[{"id":0,"peerURLs":[]}]`))
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		rc, err := DecodeMembers(header, body)
		if err != nil {
			return
		}
		if rc.ClusterID == 0 || len(rc.Members) == 0 {
			t.Fatalf("accepted an empty cluster: %+v", rc)
		}
		for _, m := range rc.Members {
			if m.ID == 0 || len(m.PeerURLs) == 0 {
				t.Fatalf("accepted a member without ID or peer URLs: %+v", m)
			}
		}
	})
}
