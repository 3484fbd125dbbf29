package huawei

// IdleSessionsClosed reports whether the reader of every pooled session
// has seen its connection end, for tests that close sessions from the
// OLT's side and must know the driver noticed before they go on.
func IdleSessionsClosed(d *Driver) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.idle {
		if len(s.errc) == 0 {
			return false
		}
	}
	return true
}
