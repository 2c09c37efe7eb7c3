package etcdcompat

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"testing"
)

func h2Frame(typ, flags byte, payload []byte) []byte {
	n := len(payload)
	return append([]byte{byte(n >> 16), byte(n >> 8), byte(n), typ, flags, 0, 0, 0, 1}, payload...)
}

var h2ClientPreface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// filtered runs input through an h2AckFilter and returns what it reads.
func filtered(t testing.TB, input []byte) []byte {
	client, server := net.Pipe()
	go func() {
		_, _ = client.Write(input)
		client.Close()
	}()
	f := &h2AckFilter{Conn: server, r: bufio.NewReader(server)}
	out, _ := io.ReadAll(f)
	server.Close()
	return out
}

func TestH2AckFilterDropsTheFirstSettingsAck(t *testing.T) {
	settings := h2Frame(h2FrameSettings, 0, []byte{0, 3, 0, 0, 0, 100})
	ack := h2Frame(h2FrameSettings, h2FlagAck, nil)
	headers := h2Frame(0x1, 0x4, []byte("hpack"))
	data := h2Frame(0x0, 0x1, []byte("body"))
	in := bytes.Join([][]byte{h2ClientPreface, settings, headers, ack, data, ack}, nil)
	want := bytes.Join([][]byte{h2ClientPreface, settings, headers, data, ack}, nil)
	if got := filtered(t, in); !bytes.Equal(got, want) {
		t.Fatalf("filtered\n%q\nwant\n%q", got, want)
	}
}

// FuzzH2AckFilter: arbitrary client bytes never panic the filter, which
// returns them unchanged except for at most one dropped 9-byte frame.
func FuzzH2AckFilter(f *testing.F) {
	f.Add(bytes.Join([][]byte{h2ClientPreface, h2Frame(h2FrameSettings, 0, nil), h2Frame(h2FrameSettings, h2FlagAck, nil)}, nil))
	f.Add(h2ClientPreface[:10])
	f.Add(append(append([]byte{}, h2ClientPreface...), 0xff, 0xff, 0xff, 0x4))
	f.Fuzz(func(t *testing.T, in []byte) {
		out := filtered(t, in)
		if len(out) > len(in) || (len(in)-len(out) != 0 && len(in)-len(out) != h2FrameHeaderLen && !bytes.HasPrefix(in, out)) {
			t.Fatalf("filter turned %d bytes into %d", len(in), len(out))
		}
	})
}
