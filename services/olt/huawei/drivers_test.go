package huawei

import "testing"

func TestDriversShareTheWriteLockPerHost(t *testing.T) {
	set := NewDrivers(Deps{})
	t.Cleanup(func() { set.Close() })
	get := func(c Config) *Driver {
		t.Helper()
		d, err := set.Get(c)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a := get(Config{Host: "10.0.0.1", User: "u", Pass: "p"})
	b := get(Config{Host: "10.0.0.1", User: "u", Pass: "p", Protocol: "ssh"})
	c := get(Config{Host: "10.0.0.2", User: "u", Pass: "p"})
	if a == b {
		t.Fatal("different transports share a driver")
	}
	if a.writeSem != b.writeSem {
		t.Error("two drivers of one host do not share the write lock")
	}
	if a.writeSem == c.writeSem {
		t.Error("two hosts share a write lock")
	}
	if again := get(Config{Host: "10.0.0.1", User: "u", Pass: "p"}); again != a {
		t.Error("the same configuration got a new driver")
	}
}
