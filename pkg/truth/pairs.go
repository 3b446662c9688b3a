// SPDX-License-Identifier: Apache-2.0

package truth

import (
	"bytes"
	"fmt"
	"io"

	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/profile/csvtab"
)

// Pair is one measurement of two applications sharing one GPU: A ran at SpeedA
// (1.0 = as fast as alone) next to B, which ran at SpeedB.
type Pair struct {
	A, B           string
	SpeedA, SpeedB float64
	// Util is the shared GPU's measured kernel utilization (NVML utilization.gpu,
	// percent) while both ran; 0 when the source does not give it.
	Util float64
}

// maxSpeed bounds a measured speed; the sources report values a little above 1 as
// noise, anything far above is a broken file.
const maxSpeed = 10

// speed reads a measured speed in (0, maxSpeed].
func speed(t *csvtab.Table, col string) (float64, error) {
	v, err := t.Float(col, 0, maxSpeed)
	if err == nil && v == 0 {
		err = t.Errf(col, "speed 0: want a number in (0, %d]", maxSpeed)
	}
	return v, err
}

// measurements reads a row's two speeds and the optional shared-GPU utilization
// percentage (column gpu_util; absent or empty = 0) into p.
func measurements(t *csvtab.Table, p *Pair, colA, colB string) (err error) {
	if p.SpeedA, err = speed(t, colA); err != nil {
		return err
	}
	if p.SpeedB, err = speed(t, colB); err != nil {
		return err
	}
	if t.Str("gpu_util") != "" {
		p.Util, err = t.Float("gpu_util", 0, 100)
	}
	return err
}

// readPairs drives a pair CSV: row turns the current row into a pair, or ok=false
// to leave the row out.
func readPairs(r io.Reader, format string, required []string, row func(t *csvtab.Table) (p Pair, ok bool, err error)) ([]Pair, error) {
	t, err := csvtab.New(r, csvtab.Options{Required: required})
	if err != nil {
		return nil, fmt.Errorf("%s pairs: %w", format, err)
	}
	var out []Pair
	for {
		if err := t.Next(); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s pairs: %w", format, err)
		}
		p, ok, err := row(t)
		if err != nil {
			return nil, fmt.Errorf("%s pairs: %w", format, err)
		}
		if ok {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s pairs: no usable data rows", format)
	}
	return out, nil
}

// ReadLucidPairs reads the Lucid co-location CSV
// (models/data/lucid-train/colocate_pairs.csv): for N in 1, 2 the columns modelN,
// batchsizeN, ampN, speedN (and gpu_numN, datasetN); a setup becomes the tag
// profile.LucidTag(model, batchsize, amp), the same tag its solo profile has.
// Rows where either job spans more than one GPU (gpu_numN > 1) are left out: the
// table is about jobs sharing one GPU.
func ReadLucidPairs(r io.Reader) ([]Pair, error) {
	req := []string{"model1", "batchsize1", "amp1", "speed1", "model2", "batchsize2", "amp2", "speed2"}
	return readPairs(r, "lucid", req, func(t *csvtab.Table) (p Pair, ok bool, err error) {
		if t.Has("gpu_num1") && (t.Str("gpu_num1") != "1" || t.Str("gpu_num2") != "1") {
			return p, false, nil
		}
		if p.A, err = profile.LucidRowTag(t, "model1", "batchsize1", "amp1"); err != nil {
			return p, false, err
		}
		if p.B, err = profile.LucidRowTag(t, "model2", "batchsize2", "amp2"); err != nil {
			return p, false, err
		}
		err = measurements(t, &p, "speed1", "speed2")
		return p, err == nil, err
	})
}

// ReadGenericPairs reads the generic pair CSV, header (column order free):
//
//	tag_a,tag_b,speed_a,speed_b[,gpu_util]
//
// one measurement per row: application tag_a ran at speed_a (relative to alone)
// while sharing one GPU with tag_b, which ran at speed_b. Tags follow
// profile.ValidateTag; speeds are in (0, 10] (values above 1 are clipped to 1
// when the table is built). The optional gpu_util is the shared GPU's kernel
// utilization in percent (NVML utilization.gpu) during the measurement.
func ReadGenericPairs(r io.Reader) ([]Pair, error) {
	return readPairs(r, "generic", []string{"tag_a", "tag_b", "speed_a", "speed_b"}, func(t *csvtab.Table) (p Pair, ok bool, err error) {
		p.A, p.B = t.Str("tag_a"), t.Str("tag_b")
		for _, col := range []string{"tag_a", "tag_b"} {
			if err := profile.ValidateTag(t.Str(col)); err != nil {
				return p, false, t.Errf(col, "%v", err)
			}
		}
		err = measurements(t, &p, "speed_a", "speed_b")
		return p, err == nil, err
	})
}

// FromLucid builds a table from Lucid-format solo profiles and pair speeds
// (the embedded data: models.DefaultSoloCSV, models.DefaultPairsCSV).
func FromLucid(solo, pairs []byte) (*Table, error) {
	ps, err := profile.ReadLucidSolo(bytes.NewReader(solo))
	if err != nil {
		return nil, fmt.Errorf("solo profiles: %w", err)
	}
	prs, err := ReadLucidPairs(bytes.NewReader(pairs))
	if err != nil {
		return nil, fmt.Errorf("pairs: %w", err)
	}
	return New(ps, prs, Options{})
}
