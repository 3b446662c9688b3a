// SPDX-License-Identifier: Apache-2.0

package residency

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// benchStore writes n active entries directly (no fsync: setup speed only).
func benchStore(b *testing.B, n int) *Store {
	dir := b.TempDir()
	s, _ := Open(dir)
	os.MkdirAll(s.activeDir(), 0o755)
	for i := 0; i < n; i++ {
		e := Entry{V: Version, JobID: fmt.Sprint(1000 + i), Node: fmt.Sprintf("n%d", i/4+1), GPUs: []int{i % 8}, Shards: 2,
			Tag: "app", Class: "train", Start: t0, Expires: t0.Add(time.Hour)}
		data, _ := Encode(&e)
		if err := os.WriteFile(filepath.Join(s.activeDir(), fileName(e.JobID, e.Node)), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkReadCached is the steady state of the plugin's background refresh:
// 4,000 running jobs (1,000 nodes x 8 GPUs, half busy), already decoded once.
func BenchmarkReadCached4000(b *testing.B) {
	s := benchStore(b, 4000)
	r := s.NewReader()
	if _, err := r.Read(t0, time.Minute); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := r.Read(t0, time.Minute)
		if err != nil || len(res.Entries) != 4000 {
			b.Fatalf("%d entries, %v", len(res.Entries), err)
		}
	}
}

// BenchmarkReadCold4000 decodes every file (first read after a restart).
func BenchmarkReadCold4000(b *testing.B) {
	s := benchStore(b, 4000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := s.List(t0, time.Minute)
		if err != nil || len(res.Entries) != 4000 {
			b.Fatalf("%d entries, %v", len(res.Entries), err)
		}
	}
}
