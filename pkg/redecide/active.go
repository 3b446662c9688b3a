// SPDX-License-Identifier: Apache-2.0

package redecide

import (
	"strings"
)

// Controller is one slurmctld of the cluster as `scontrol ping` reports it.
type Controller struct {
	Role string // primary, backup, backup2, ...
	Host string // its SlurmctldHost name
	Up   bool
}

// ParsePing reads `scontrol ping`, whose lines are "Slurmctld(ROLE) at HOST is
// UP" or "... is DOWN" in every release from 22.05 to 26.05 (scontrol.c's
// _print_ping), in SlurmctldHost order. Other lines (the banner printed when
// one is down) are skipped, as is a line of any other shape: no line is
// trusted beyond its shape.
func ParsePing(out string) []Controller {
	var cs []Controller
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Slurmctld(")
		if !ok {
			continue
		}
		role, rest, ok := strings.Cut(rest, ") at ")
		if !ok || role == "" || strings.ContainsAny(role, " ()") {
			continue
		}
		i := strings.LastIndex(rest, " is ")
		if i <= 0 {
			continue
		}
		host, state := rest[:i], rest[i+len(" is "):]
		if strings.ContainsAny(host, " \t") || (state != "UP" && state != "DOWN") {
			continue
		}
		cs = append(cs, Controller{Role: role, Host: host, Up: state == "UP"})
	}
	return cs
}

// InControl says whether a loop on host should re-decide, given the cluster's
// controllers (ParsePing), and if not, why. The controller in control is the
// first one that answers, in SlurmctldHost order: a backup takes over only
// while the controllers before it are down, and hands control back when the
// primary returns. A host that is not one of the controllers (a cluster without
// a backup that names its controller otherwise, or a loop run elsewhere) and an
// answer naming no controller up keep the loop running, as without the check:
// only a standby controller whose active peer answers stays idle, because two
// loops re-decide every job twice (docs/install.md).
func InControl(cs []Controller, host string) (bool, string) {
	listed := false
	for _, c := range cs {
		if sameHost(c.Host, host) {
			listed = true
		}
	}
	if !listed {
		return true, ""
	}
	for _, c := range cs {
		if !c.Up {
			continue
		}
		if sameHost(c.Host, host) {
			return true, ""
		}
		return false, "Slurmctld(" + c.Role + ") at " + c.Host + " is in control"
	}
	return true, ""
}

// sameHost compares host names by their first label, without case:
// SlurmctldHost usually names the short host name, os.Hostname may be the
// fully qualified one.
func sameHost(a, b string) bool {
	a, _, _ = strings.Cut(a, ".")
	b, _, _ = strings.Cut(b, ".")
	return a != "" && strings.EqualFold(a, b)
}
