// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/urfave/cli/v2"
)

// usageError is a mistake in the command line itself: a bad flag, a missing or
// extra argument, a malformed value. It maps to exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usageErrorf builds a usageError; callers sanitize any user text they include.
func usageErrorf(format string, a ...any) error {
	return &usageError{msg: fmt.Sprintf(format, a...)}
}

// notFoundError marks a lookup that found nothing (exit 3) when the cause is not
// already profile.ErrNotFound or fs.ErrNotExist.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

// exitCode maps an error to the documented exit codes: 2 usage, 3 not found,
// 1 anything else. An explicit cli.Exit code wins.
func exitCode(err error) int {
	var ue *usageError
	var nf *notFoundError
	var ec cli.ExitCoder
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, profile.ErrNotFound), errors.Is(err, fs.ErrNotExist), errors.As(err, &nf):
		return exitNotFound
	case errors.As(err, &ec) && ec.ExitCode() > 0:
		return ec.ExitCode()
	}
	return exitFailure
}

// sanitize makes user input safe to echo in a message.
func sanitize(s string) string { return profile.Sanitize(s) }
