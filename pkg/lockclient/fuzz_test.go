package lockclient

import (
	"bytes"
	"testing"
)

// FuzzEventReader: any stream yields events until an error; nothing
// panics and a stream always ends.
func FuzzEventReader(f *testing.F) {
	f.Add([]byte("{\"status\":\"queued\",\"position\":2}\n\n{\"status\":\"acquired\",\"token\":41}\n"))
	f.Add([]byte("\n\n\n"))
	f.Add([]byte("{\"status\":"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := newEventReader(bytes.NewReader(stream))
		for i := 0; ; i++ {
			if i > len(stream)+1 {
				t.Fatalf("more events than lines in %q", stream)
			}
			if _, err := r.next(); err != nil {
				return
			}
		}
	})
}
