// Package proto is the contract between the gateway, the services and
// third-party taps: the operation table (package api: every operation's
// subject, HTTP forms, typed request and answer, event, timeout), the bus
// envelope and reply (package bus), the events services publish (package
// event), and the markers by which each service recognises the kernel
// state it owns (package kernel). It has no dependencies so that every
// module, including a third-party tap, can import it cheaply.
package proto
