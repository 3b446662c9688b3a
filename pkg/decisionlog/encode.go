// SPDX-License-Identifier: Apache-2.0

package decisionlog

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
)

// appendRecord appends r's JSON, byte for byte what encoding/json writes for
// it (FuzzAppendRecord holds the two together), without reflection: the
// writer's goroutine runs in slurmctld after each decision, where the
// reflective encoder's code and type caches are cold
// (docs/performance-slurm.md). On an error (a NaN or infinite speed, a time
// JSON cannot hold) dst is returned as given.
func appendRecord(dst []byte, r *Record) ([]byte, error) {
	b := append(dst, `{"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"time":"`...)
	var err error
	if b, err = r.Time.AppendText(b); err != nil {
		return dst, errors.New("Time.MarshalJSON: " + err.Error())
	}
	b = append(b, `","op":`...)
	b = appendString(b, r.Op)
	b = appendOptString(b, `,"job_id":`, r.JobID)
	b = strconv.AppendUint(append(b, `,"user_id":`...), uint64(r.UserID), 10)
	b = appendOptString(b, `,"tag":`, r.Tag)
	b = appendOptString(b, `,"class":`, r.Class)
	b = appendString(append(b, `,"outcome":`...), r.Outcome)
	b = appendString(append(b, `,"action":`...), r.Action)
	b = appendOptString(b, `,"node":`, r.Node)
	b = strconv.AppendInt(append(b, `,"gpu":`...), int64(r.GPU), 10)
	if r.Shards != 0 {
		b = strconv.AppendInt(append(b, `,"shards":`...), int64(r.Shards), 10)
	}
	if len(r.GPUs) > 0 {
		b = append(b, `,"gpus":[`...)
		for i, g := range r.GPUs {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(g), 10)
		}
		b = append(b, ']')
	}
	b = appendOptStrings(b, `,"nodes":[`, r.Nodes)
	b = appendOptStrings(b, `,"replaces":[`, r.Replaces)
	for _, f := range [...]struct {
		key string
		v   float64
	}{{`,"predicted_speed":`, r.PredictedSpeed}, {`,"min_resident_speed":`, r.MinResidentSpeed}} {
		if f.v != 0 {
			if b, err = appendFloat(append(b, f.key...), f.v); err != nil {
				return dst, err
			}
		}
	}
	b = appendOptStrings(b, `,"co_runners":[`, r.CoRunners)
	b = appendOptString(b, `,"policy":`, r.Policy)
	b = appendString(append(b, `,"reason":`...), r.Reason)
	b = appendOptString(b, `,"tres_in":`, r.TresIn)
	b = appendOptString(b, `,"tres_out":`, r.TresOut)
	return append(b, '}'), nil
}

func appendOptString(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(append(b, key...), s)
}

func appendOptStrings(b []byte, keyOpen string, ss []string) []byte {
	if len(ss) == 0 {
		return b
	}
	b = append(b, keyOpen...)
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendFloat is encoding/json's float64: ES6 number form, no NaN or infinity.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, errors.New("json: unsupported value: " + strconv.FormatFloat(f, 'g', -1, 64))
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-09 -> e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// appendString is encoding/json's string with HTML escaping (its default):
// <, > and & as \u003c..., control bytes escaped, invalid UTF-8 as \ufffd,
// U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(append(b, s[start:i]...), `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(b, s[start:]...), '"')
}
