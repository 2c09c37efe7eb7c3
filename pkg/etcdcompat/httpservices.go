package etcdcompat

import (
	"context"
	"fmt"
	"net/http"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// HTTPService is a service of the member's own served on the client
// port's HTTP side (Config.HTTPServices): the package that owns the
// member builds it over the in-process client, so that this package
// needs to know nothing of it.
type HTTPService struct {
	// Path is the pattern it is served under (http.ServeMux), e.g.
	// "/v1/lock/".
	Path string
	// Build builds it over local, a client of the member's own services
	// that lives as long as the ClientServer.
	Build func(local *clientv3.Client) (HTTPHandler, error)
}

// HTTPHandler is a built HTTPService: a handler whose requests may
// outlive a plain http.Server shutdown (streams), ended by Close.
type HTTPHandler interface {
	http.Handler
	// Close ends the requests in flight, bounded by ctx.
	Close(ctx context.Context)
}

// builtService is an HTTPService with its handler.
type builtService struct {
	HTTPHandler
	path string
}

// buildServices builds each of services over local; on error none is
// left open.
func buildServices(services []HTTPService, local *clientv3.Client) ([]builtService, error) {
	var built []builtService
	for _, svc := range services {
		h, err := svc.Build(local)
		if err != nil {
			for _, b := range built {
				b.Close(context.Background())
			}
			return nil, fmt.Errorf("HTTP service %s: %w", svc.Path, err)
		}
		built = append(built, builtService{HTTPHandler: h, path: svc.Path})
	}
	return built, nil
}
