package truth

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/coscheml/coscheml/pkg/profile"
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

func parseSpeed(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || v <= 0 || v > maxSpeed {
		return 0, fmt.Errorf("speed %q: want a number in (0, %d]", profile.Sanitize(s), maxSpeed)
	}
	return v, nil
}

// parseUtil reads an optional utilization percentage ("" = not given = 0).
func parseUtil(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || v < 0 || v > 100 {
		return 0, fmt.Errorf("%q: want a percentage in 0..100", profile.Sanitize(s))
	}
	return v, nil
}

func readHeader(cr *csv.Reader, format string, want ...string) (map[string]int, error) {
	row, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s pairs: empty file, want a header row", format)
		}
		return nil, fmt.Errorf("%s pairs: header: %w", format, err)
	}
	idx := map[string]int{}
	for i, h := range row {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if _, dup := idx[h]; !dup {
			idx[h] = i
		}
	}
	for _, w := range want {
		if _, ok := idx[w]; !ok {
			return nil, fmt.Errorf("%s pairs: header lacks column %s", format, w)
		}
	}
	return idx, nil
}

func get(row []string, idx map[string]int, name string) string {
	if i, ok := idx[name]; ok && i < len(row) {
		return strings.TrimSpace(row[i])
	}
	return ""
}

// ReadLucidPairs reads the Lucid co-location CSV
// (models/data/lucid-train/colocate_pairs.csv): for N in 1, 2 the columns modelN,
// batchsizeN, ampN, speedN (and gpu_numN, datasetN); a setup becomes the tag
// profile.LucidTag(model, batchsize, amp), the same tag its solo profile has.
// Rows where either job spans more than one GPU (gpu_numN > 1) are left out: the
// table is about jobs sharing one GPU.
func ReadLucidPairs(r io.Reader) ([]Pair, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	idx, err := readHeader(cr, "lucid", "model1", "batchsize1", "amp1", "speed1", "model2", "batchsize2", "amp2", "speed2")
	if err != nil {
		return nil, err
	}
	_, hasNum := idx["gpu_num1"]
	var out []Pair
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("lucid pairs: %w", err)
		}
		line, _ := cr.FieldPos(0)
		if hasNum && (get(row, idx, "gpu_num1") != "1" || get(row, idx, "gpu_num2") != "1") {
			continue
		}
		var p Pair
		for n, dst := range []*string{&p.A, &p.B} {
			s := strconv.Itoa(n + 1)
			tag, err := lucidTag(get(row, idx, "model"+s), get(row, idx, "batchsize"+s), get(row, idx, "amp"+s))
			if err != nil {
				return nil, fmt.Errorf("lucid pairs line %d: job %s: %w", line, s, err)
			}
			*dst = tag
		}
		if p.SpeedA, err = parseSpeed(get(row, idx, "speed1")); err != nil {
			return nil, fmt.Errorf("lucid pairs line %d: speed1: %w", line, err)
		}
		if p.SpeedB, err = parseSpeed(get(row, idx, "speed2")); err != nil {
			return nil, fmt.Errorf("lucid pairs line %d: speed2: %w", line, err)
		}
		if p.Util, err = parseUtil(get(row, idx, "gpu_util")); err != nil {
			return nil, fmt.Errorf("lucid pairs line %d: gpu_util: %w", line, err)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("lucid pairs: no single-GPU pair rows")
	}
	return out, nil
}

func lucidTag(model, batch, amp string) (string, error) {
	b, err := strconv.Atoi(batch)
	if err != nil || b <= 0 || b > 1<<20 {
		return "", fmt.Errorf("batchsize %q: want a positive whole number", profile.Sanitize(batch))
	}
	var on bool
	switch amp {
	case "0":
	case "1":
		on = true
	default:
		return "", fmt.Errorf("amp %q: want 0 or 1", profile.Sanitize(amp))
	}
	return profile.LucidTag(model, b, on)
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
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	idx, err := readHeader(cr, "generic", "tag_a", "tag_b", "speed_a", "speed_b")
	if err != nil {
		return nil, err
	}
	var out []Pair
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("generic pairs: %w", err)
		}
		line, _ := cr.FieldPos(0)
		p := Pair{A: get(row, idx, "tag_a"), B: get(row, idx, "tag_b")}
		for _, t := range []string{p.A, p.B} {
			if err := profile.ValidateTag(t); err != nil {
				return nil, fmt.Errorf("generic pairs line %d: %w", line, err)
			}
		}
		if p.SpeedA, err = parseSpeed(get(row, idx, "speed_a")); err != nil {
			return nil, fmt.Errorf("generic pairs line %d: speed_a: %w", line, err)
		}
		if p.SpeedB, err = parseSpeed(get(row, idx, "speed_b")); err != nil {
			return nil, fmt.Errorf("generic pairs line %d: speed_b: %w", line, err)
		}
		if p.Util, err = parseUtil(get(row, idx, "gpu_util")); err != nil {
			return nil, fmt.Errorf("generic pairs line %d: gpu_util: %w", line, err)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("generic pairs: no data rows")
	}
	return out, nil
}
