package system

import (
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/services/system/versions"
	"routerd.dev/shared/store"
)

// VersionsOf is the versions store the service keeps in kv, for tests that
// store a version the way a save does.
func VersionsOf(kv *clientv3.Client) *versions.Store { return versions.New(store.New(kv, Name), nil) }
