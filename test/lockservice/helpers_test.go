package lockservice

import (
	"context"
	"errors"
	"net/http"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/lockclient"
	"github.com/metastore-io/metastore/test/framework"
)

func asStatus(err error, target **lockclient.StatusError) bool { return errors.As(err, target) }

func httpGet(ctx context.Context, hc *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// memberStatus asks m, through cli, for its Maintenance status.
func memberStatus(ctx context.Context, cli *clientv3.Client, m *framework.Member) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return cli.Status(ctx, m.Endpoint())
}
