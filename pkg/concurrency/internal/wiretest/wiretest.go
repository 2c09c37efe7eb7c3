package wiretest

import (
	"encoding/hex"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// Golden is a message and the hex of etcd's encoding of it.
type Golden struct {
	Msg protoadapt.MessageV1
	Hex string
}

// CheckGolden fails t for every message whose encoding differs from its
// golden one.
func CheckGolden(t testing.TB, cases []Golden) {
	t.Helper()
	for _, tc := range cases {
		got, err := proto.Marshal(protoadapt.MessageV2Of(tc.Msg))
		if err != nil {
			t.Fatalf("marshal %v: %v", tc.Msg, err)
		}
		if hex.EncodeToString(got) != tc.Hex {
			t.Errorf("marshal %T %v = %x, want %s", tc.Msg, tc.Msg, got, tc.Hex)
		}
	}
}

// CheckRoundTrip decodes data as each message newMsg makes: decoding must
// not panic, and a message that decodes must come back equal from a
// marshal/unmarshal round trip.
func CheckRoundTrip(t testing.TB, data []byte, newMsgs ...func() protoadapt.MessageV1) {
	t.Helper()
	for _, newMsg := range newMsgs {
		m := newMsg()
		if proto.Unmarshal(data, protoadapt.MessageV2Of(m)) != nil {
			continue
		}
		again, err := proto.Marshal(protoadapt.MessageV2Of(m))
		if err != nil {
			t.Fatalf("re-marshal %T: %v", m, err)
		}
		m2 := newMsg()
		if err := proto.Unmarshal(again, protoadapt.MessageV2Of(m2)); err != nil {
			t.Fatalf("re-unmarshal %T: %v", m, err)
		}
		if !proto.Equal(protoadapt.MessageV2Of(m), protoadapt.MessageV2Of(m2)) {
			t.Fatalf("%T changed in a round trip: %v vs %v", m, m, m2)
		}
	}
}
