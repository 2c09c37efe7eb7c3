package embed_test

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/embed"
)

// A member inside the program, on free loopback ports, used through
// etcd's own Go client.
func ExampleStartMember() {
	dir, err := os.MkdirTemp("", "embed-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	cfg := embed.NewConfig()
	cfg.Dir = dir
	anyPort := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{anyPort}, []url.URL{anyPort}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{anyPort}, []url.URL{anyPort}
	m, err := embed.StartMember(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	select {
	case <-m.ReadyNotify():
	case err := <-m.Err():
		log.Fatal(err)
	case <-time.After(time.Minute):
		log.Fatal("the member took too long to start")
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: m.ClientURLs(), DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "greeting", "hello"); err != nil {
		log.Fatal(err)
	}
	resp, err := cli.Get(ctx, "greeting")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s = %s\n", resp.Kvs[0].Key, resp.Kvs[0].Value)
	// Output: greeting = hello
}
