package bus

import (
	"encoding/json"
	"net/url"
	"reflect"
	"testing"
)

func TestRequestWire(t *testing.T) {
	for _, r := range []Request{
		{},
		{Method: "GET", Path: "/status", Caller: "127.0.0.1", RequestID: "00ff"},
		{Method: "POST", Path: "/plans/gold", Params: map[string]string{"name": "gold", "x": ""},
			Query: url.Values{"by": {"ann"}, "multi": {"a", "", "c"}, "": {"v"}},
			Args:  json.RawMessage(`{"name":"gold","down_mbps":100}`), Caller: "10.0.0.1", By: "ann",
			RequestID: "r1", Action: "plans-set", Headers: map[string]string{"X-Olt-Name": "olt1"}},
	} {
		b, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got Request
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, r)
		}
		again, _ := got.MarshalBinary()
		if string(again) != string(b) {
			t.Errorf("not the same bytes the second time")
		}
	}
}

// TestRequestWireRefused: a truncated or garbled message is an error, not
// a panic or a half-read request taken as whole.
func TestRequestWireRefused(t *testing.T) {
	r := Request{Method: "POST", Path: "/plans", Args: json.RawMessage(`{"a":1}`), Params: map[string]string{"k": "v"}}
	b, _ := r.MarshalBinary()
	for i := 1; i < len(b); i++ {
		var got Request
		if err := got.UnmarshalBinary(b[:i]); err == nil && reflect.DeepEqual(got, r) {
			t.Errorf("truncated to %d bytes decoded as the whole", i)
		}
	}
	for _, bad := range [][]byte{{0x0a, 0x05, 'G'}, {0xff}, {0x0b}, {0x0a}} {
		var got Request
		if err := got.UnmarshalBinary(bad); err == nil {
			t.Errorf("%x: decoded as %+v", bad, got)
		}
	}
}

// TestRequestWireSkipsUnknown: fields a newer sender adds are skipped.
func TestRequestWireSkipsUnknown(t *testing.T) {
	b, _ := (&Request{Method: "GET"}).MarshalBinary()
	b = append(b, 0xa8, 0x01, 0x07)                   // field 21, varint 7
	b = append(b, 0xb2, 0x01, 0x02, 'h', 'i')         // field 22, bytes "hi"
	b = append(b, 0xbd, 0x01, 1, 2, 3, 4)             // field 23, 32-bit
	b = append(b, 0xc1, 0x01, 1, 2, 3, 4, 5, 6, 7, 8) // field 24, 64-bit
	b = append(b, 0x12, 0x01, '/')                    // path after them
	var got Request
	if err := got.UnmarshalBinary(b); err != nil || got.Method != "GET" || got.Path != "/" {
		t.Fatalf("%+v, %v", got, err)
	}
}

func BenchmarkRequestWire(b *testing.B) {
	r := Request{Method: "POST", Path: "/echo", Args: json.RawMessage(`{"name":"gold","n":500}`), Caller: "127.0.0.1", RequestID: "0123456789abcdef"}
	b.Run("binary", func(b *testing.B) {
		for b.Loop() {
			data, _ := r.MarshalBinary()
			var got Request
			if err := got.UnmarshalBinary(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			data, _ := json.Marshal(&r)
			var got Request
			if err := json.Unmarshal(data, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
}
