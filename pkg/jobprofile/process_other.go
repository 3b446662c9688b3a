// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package jobprofile

import "errors"

var errNoDetach = errors.New("detached samplers need a Unix node")

func startDetached(string, []string, string) (int, error) { return 0, errNoDetach }

func stopSampler(string) error { return nil }
