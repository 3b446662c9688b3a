// SPDX-License-Identifier: Apache-2.0

package placement

import "testing"

func TestFirstFitSlots(t *testing.T) {
	gpu := func(used int) GPU {
		return GPU{Slots: 4, Residents: []Resident{{JobID: "x", Slots: used}}}
	}
	cases := []struct {
		name   string
		gpus   []GPU
		g      int
		k      int
		wantOK bool
	}{
		{"lowest GPU", []GPU{gpu(2), gpu(0)}, 0, 2, true},
		{"past a half-full GPU: 3", []GPU{gpu(2), gpu(0)}, 1, 3, true},
		{"past a GPU as free: none", []GPU{gpu(2), gpu(2)}, 1, 3, false},
		{"past full GPUs", []GPU{gpu(4), gpu(4), gpu(2)}, 2, 2, true},
		// A queued decision holds nothing in Slurm until its job starts.
		{"past a GPU only reserved", []GPU{{Slots: 4, Residents: []Resident{{JobID: "d", Slots: 4, Kind: Reserved}}}, gpu(2)}, 1, 5, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, ok := firstFitSlots(&Node{GPUs: tc.gpus}, tc.g, 2)
			if k != tc.k || ok != tc.wantOK {
				t.Fatalf("firstFitSlots = %d, %v; want %d, %v", k, ok, tc.k, tc.wantOK)
			}
		})
	}
}

func TestUniqueFit(t *testing.T) {
	gpu := func(used ...int) GPU {
		g := GPU{Slots: 4}
		for i, u := range used {
			g.Residents = append(g.Residents, Resident{JobID: string(rune('a' + i)), Slots: u})
		}
		return g
	}
	cases := []struct {
		name   string
		gpus   []GPU
		g      int
		want   int
		k      int
		wantOK bool
	}{
		{"only GPU", []GPU{gpu(2)}, 0, 2, 2, true},
		{"others full", []GPU{gpu(4), gpu(2), gpu(2, 2)}, 1, 2, 2, true},
		{"another as free", []GPU{gpu(2), gpu(2)}, 1, 2, 3, false},
		{"an idle one elsewhere", []GPU{gpu(2), gpu()}, 0, 2, 5, false},
		{"idle, others hold 2 free: 3 shards", []GPU{gpu(2), gpu()}, 1, 2, 3, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, ok := uniqueFit(&Node{GPUs: tc.gpus}, tc.g, tc.want)
			if k != tc.k || ok != tc.wantOK {
				t.Fatalf("uniqueFit = %d, %v; want %d, %v", k, ok, tc.k, tc.wantOK)
			}
		})
	}
}

// UntypedSlots prefers a count only the GPU can hold, then first fit's; and the
// count it gives lands on the GPU under Slurm's first fit (FirstFitGPU).
func TestUntypedSlots(t *testing.T) {
	gpu := func(used ...int) GPU {
		g := GPU{Slots: 4}
		for _, u := range used {
			g.Residents = append(g.Residents, Resident{JobID: "x", Slots: u})
		}
		return g
	}
	reserved := GPU{Slots: 4, Residents: []Resident{{JobID: "d", Slots: 2, Kind: Reserved}}}
	cases := []struct {
		name           string
		gpus           []GPU
		g, want, k     int
		unique, wantOK bool
	}{
		{"alone on the node", []GPU{gpu(2)}, 0, 2, 2, true, true},
		{"unique past full GPUs", []GPU{gpu(4), gpu(2), gpu(4)}, 1, 2, 2, true, true},
		{"first fit only: an idle GPU above", []GPU{gpu(2), gpu()}, 0, 2, 2, false, true},
		{"first fit past a half-full GPU", []GPU{gpu(2), gpu(), gpu()}, 1, 2, 3, false, true},
		{"no count lands", []GPU{gpu(2), gpu(2)}, 1, 2, 3, false, false},
		{"a reserved lower GPU is free to Slurm", []GPU{reserved, gpu(2)}, 1, 2, 5, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := &Node{GPUs: tc.gpus}
			k, unique, ok := UntypedSlots(node, tc.g, tc.want)
			if k != tc.k || unique != tc.unique || ok != tc.wantOK {
				t.Fatalf("UntypedSlots = %d, %v, %v; want %d, %v, %v", k, unique, ok, tc.k, tc.unique, tc.wantOK)
			}
			if ok && FirstFitGPU(node, k) != tc.g {
				t.Fatalf("%d shards: first fit lands on GPU %d, want %d", k, FirstFitGPU(node, k), tc.g)
			}
		})
	}
}
