// Package netns runs code inside a target network namespace, so the engine
// opens its sockets and netlink handle there and never in whatever namespace
// the process happens to run in.
//
// A socket belongs to the namespace it was created in for its whole life, so
// switching only for the socket() call is enough: the OS thread is locked,
// moved into the target, the socket opened, and the thread moved back.
package netns

import (
	"fmt"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Target names a network namespace: a path such as /var/run/netns/NAME or
// /proc/PID/ns/net. The empty Target is the process's own namespace.
type Target string

// Do runs fn with the calling goroutine's OS thread inside t.
func (t Target) Do(fn func() error) error {
	if t == "" {
		return fn()
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("current netns: %w", err)
	}
	defer orig.Close()
	target, err := netns.GetFromPath(string(t))
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open netns %s: %w", t, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter netns %s: %w", t, err)
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		// Leave the thread locked: the runtime then ends it with the
		// goroutine instead of reusing a thread in the wrong namespace.
		return fmt.Errorf("leave netns %s: %w", t, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// Handle returns a netlink handle bound to t.
func (t Target) Handle() (*netlink.Handle, error) {
	if t == "" {
		return netlink.NewHandle()
	}
	ns, err := netns.GetFromPath(string(t))
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", t, err)
	}
	defer ns.Close()
	return netlink.NewHandleAt(ns)
}

// WriteSysctl writes a /proc/sys file as seen from inside t (net.* sysctls
// are per namespace).
func (t Target) WriteSysctl(path, value string) error {
	return t.Do(func() error { return os.WriteFile(path, []byte(value), 0o644) })
}
