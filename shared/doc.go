// Package shared is the small library every service and the gateway build
// on: opening the bus and the store, typed etcd documents, the API error set,
// the JSON writer and the target network namespace. Each concern lives in its
// own sub-package.
package shared
