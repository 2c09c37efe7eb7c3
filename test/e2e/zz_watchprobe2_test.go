package e2e

import (
	"github.com/metastore-io/metastore/test/framework"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func clusterConfigProbe() framework.ClusterConfig { return framework.ClusterConfig{} }
func clientv3OpPut(k, v string) clientv3.Op       { return clientv3.OpPut(k, v) }
