// Package proto is the contract between the gateway and the services: the
// subjects each operation travels on, the request envelope and its reply,
// and the events services publish. It has no dependencies so that every
// module, including a third-party tap, can import it cheaply.
package proto
