// Command httplockbench measures lock throughput over HTTP: MetaStore's
// lock service (/v1/lock/, through pkg/lockclient) next to etcd's v3lock
// JSON gateway (/v3/lock/lock and /unlock, with a lease granted and
// revoked per acquisition, which is the same work: a lease, a key, its
// deletion and the lease's revocation). Two workloads:
//
//   - uncontended: every worker locks and unlocks a resource of its own
//     in a loop; the figure is lock/unlock pairs per second;
//   - contended: every worker locks and unlocks the same resource; the
//     lock is FIFO, so the figure is handovers per second.
//
// Workers are spread over the endpoints round-robin. bench/httplock.sh
// starts 1- and 3-member clusters of both servers and runs this program:
//
//	go run ./bench/httplockbench --api=http-lock --endpoints=127.0.0.1:2379 --label=metastore
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metastore-io/metastore/pkg/lockclient"
)

func main() {
	api := flag.String("api", "http-lock", "http-lock (MetaStore's /v1/lock/) or v3lock-gateway (etcd's /v3/lock/)")
	endpoints := flag.String("endpoints", "127.0.0.1:2379", "comma-separated host:port list")
	label := flag.String("label", "", "name printed with the results")
	workers := flag.Int("workers", 16, "concurrent workers")
	duration := flag.Duration("duration", 5*time.Second, "length of each workload")
	flag.Parse()
	eps := strings.Split(*endpoints, ",")
	for i, ep := range eps {
		eps[i] = "http://" + ep
	}
	transport := &http.Transport{MaxIdleConns: 4 * *workers, MaxIdleConnsPerHost: 4 * *workers}
	hc := &http.Client{Transport: transport}
	var newLocker func(endpoint string) (locker, error)
	switch *api {
	case "http-lock":
		newLocker = func(ep string) (locker, error) { return newHTTPLock(hc, ep) }
	case "v3lock-gateway":
		newLocker = func(ep string) (locker, error) { return &gatewayLock{hc: hc, endpoint: ep}, nil }
	default:
		fmt.Fprintf(os.Stderr, "unknown --api %q\n", *api)
		os.Exit(2)
	}
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	for _, workload := range []string{"uncontended", "contended"} {
		ops, err := measure(newLocker, eps, *workers, *duration, func(w int) string {
			if workload == "contended" {
				return "bench-" + run + "-shared"
			}
			return fmt.Sprintf("bench-%s-%d", run, w)
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s %s: %v\n", *label, workload, err)
			os.Exit(1)
		}
		fmt.Printf("RESULT label=%s api=%s workload=%s workers=%d ops_per_sec=%.0f\n", *label, *api, workload, *workers, ops)
	}
}

// locker is one worker's way of taking and releasing a named lock.
type locker interface {
	lockUnlock(ctx context.Context, name, node string) error
}

// measure runs workers in parallel for d and returns completed
// lock/unlock pairs per second.
func measure(newLocker func(string) (locker, error), eps []string, workers int, d time.Duration, resource func(int) string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var done atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	start := time.Now()
	for w := range workers {
		l, err := newLocker(eps[w%len(eps)])
		if err != nil {
			return 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := fmt.Sprintf("worker-%d", w)
			for ctx.Err() == nil {
				if err := l.lockUnlock(ctx, resource(w), node); err != nil {
					if ctx.Err() == nil {
						errc <- err
						cancel()
					}
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	select {
	case err := <-errc:
		return 0, err
	default:
	}
	return float64(done.Load()) / elapsed.Seconds(), nil
}

// httpLock uses MetaStore's lock service through pkg/lockclient.
type httpLock struct{ c *lockclient.Client }

func newHTTPLock(hc *http.Client, endpoint string) (*httpLock, error) {
	c, err := lockclient.New(lockclient.Config{Endpoints: []string{endpoint}, HTTPClient: hc, MaxRetries: -1, Timeout: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	return &httpLock{c: c}, nil
}

func (h *httpLock) lockUnlock(ctx context.Context, name, node string) error {
	l, err := h.c.Lock(ctx, lockclient.Request{Type: "bench", ResourceID: name, NodeID: node})
	if err != nil {
		return err
	}
	released, err := l.Unlock(context.WithoutCancel(ctx), true, nil)
	if err == nil && !released {
		err = errors.New("not released")
	}
	return err
}

// gatewayLock uses etcd's v3lock JSON gateway with a lease per lock.
type gatewayLock struct {
	hc       *http.Client
	endpoint string
}

func (g *gatewayLock) post(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.endpoint+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := g.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (g *gatewayLock) lockUnlock(ctx context.Context, name, _ string) error {
	var grant struct {
		ID string `json:"ID"`
	}
	if err := g.post(ctx, "/v3/lease/grant", map[string]any{"TTL": 10}, &grant); err != nil {
		return err
	}
	var locked struct {
		Key string `json:"key"`
	}
	lockErr := g.post(ctx, "/v3/lock/lock", map[string]any{"name": base64.StdEncoding.EncodeToString([]byte(name)), "lease": grant.ID}, &locked)
	after := context.WithoutCancel(ctx)
	if lockErr == nil {
		lockErr = g.post(after, "/v3/lock/unlock", map[string]any{"key": locked.Key}, nil)
	}
	return errors.Join(lockErr, g.post(after, "/v3/lease/revoke", map[string]any{"ID": grant.ID}, nil))
}
