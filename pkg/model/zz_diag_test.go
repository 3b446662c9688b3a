package model

import "testing"

func TestDiagMargins(t *testing.T) {
	m, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("LFO levels %v default %v; seen levels %v default %v", m.Calibration.Levels, m.Calibration.DefaultCoverage, m.SeenCalibration.Levels, m.SeenCalibration.DefaultCoverage)
	for _, c := range []float64{0, 0.9, 0.925, 0.95, 0.975} {
		t.Logf("cov %v: LFO@0.75 %.3f @0.9 %.3f @1 %.3f; seen@0.75 %.3f @0.9 %.3f @1 %.3f", c, m.Margin(0.75, c), m.Margin(0.9, c), m.Margin(1, c), m.SeenMargin(0.75, c), m.SeenMargin(0.9, c), m.SeenMargin(1, c))
	}
}
