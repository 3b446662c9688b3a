// SPDX-License-Identifier: Apache-2.0

package model

import "strings"

// Family is the default application grouping for leave-applications-out
// validation: the tag up to "-bs" (all batch sizes and precisions of one model are
// one application: "resnet18-bs32-amp" -> "resnet18"); a tag without "-bs" is its
// own application.
func Family(tag string) string {
	if i := strings.Index(tag, "-bs"); i > 0 {
		return tag[:i]
	}
	return tag
}
