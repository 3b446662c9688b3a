package training

import (
	"bytes"
	"os"
	"testing"

	"github.com/coscheml/coscheml/models"
	"github.com/coscheml/coscheml/pkg/observation"
	"github.com/coscheml/coscheml/pkg/profile"
)

func TestDiagPerFloor(t *testing.T) {
	if os.Getenv("DIAG") == "" {
		t.Skip()
	}
	ps, _ := profile.ReadLucidSolo(bytes.NewReader(models.DefaultSoloCSV))
	cat := profile.Catalog{}
	for _, p := range ps {
		cat[p.Tag] = p
	}
	obs, _ := observation.ReadLucidPairs(bytes.NewReader(models.DefaultPairsCSV))
	ds, err := BuildDataset(cat, obs)
	if err != nil {
		t.Fatal(err)
	}
	p := DefaultParams()
	lfo, err := LeaveFamiliesOut(ds, p)
	if err != nil {
		t.Fatal(err)
	}
	lpo, err := LeavePairsOut(ds, SeenPairsFolds, p, p.Seed)
	if err != nil {
		t.Fatal(err)
	}
	for name, oof := range map[string][]OutOfFold{"lfo": lfo.OutOfFold, "lpo": lpo.OutOfFold} {
		for _, fl := range [][]FloorWeight{nil, {{0.75, 1}}, {{0.9, 1}}} {
			_, ch, err := Calibrate(oof, CalibrationOptions{Floors: fl})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s floors %v: chosen %v", name, fl, ch.Chosen)
			for l := range ch.Levels {
				t.Logf("   %.3f viol %.4f acc %.3f", ch.Levels[l], ch.Violation[l], ch.Accepted[l])
			}
		}
	}
}
