package schedule

import "testing"

// TestDeciderShardOfIsFNV1a32 pins the hash: a schedule's decider shard is
// stored, so every process and every release must compute the same one.
// The vectors are FNV-1a 32's published ones ("" → 0x811c9dc5, "a" →
// 0xe40c292c, "foobar" → 0xbf9cf968).
func TestDeciderShardOfIsFNV1a32(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		id   string
		sum  uint32
		v    int
		want int
	}{
		{"", 0x811c9dc5, 64, int(uint32(0x811c9dc5) % 64)},
		{"a", 0xe40c292c, 64, int(uint32(0xe40c292c) % 64)},
		{"foobar", 0xbf9cf968, 1000, int(uint32(0xbf9cf968) % 1000)},
		{"anything", 0, 1, 0},
	} {
		if got := DeciderShardOf(c.id, c.v); got != c.want {
			t.Errorf("DeciderShardOf(%q, %d) = %d, want %d", c.id, c.v, got, c.want)
		}
	}
}

// TestDeciderShardsSpread: 2,000 sequential ids land in every one of 64
// shards, none with more than twice its share, so no partition gets a
// hot range when ids are sequential.
func TestDeciderShardsSpread(t *testing.T) {
	t.Parallel()
	var n [64]int
	for i := range 2000 {
		n[DeciderShardOf("job-"+itoa(i), 64)]++
	}
	for v, c := range n {
		if c == 0 || c > 2*2000/64 {
			t.Errorf("shard %d has %d of 2000 schedules", v, c)
		}
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
