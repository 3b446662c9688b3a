// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/model"
)

// checkModel loads the model the plugin would use: model_path, or the default
// model, which a build without the Lucid data (the packaged programs) finds only
// when coscheml-model-lucid is installed. Without a model tagged jobs pass
// through unchanged, so that is a failure, not a warning.
func checkModel(p *preflight, cfg config.Config) {
	if cfg.ModelPath != "" {
		if _, err := model.Load(cfg.ModelPath); err != nil {
			p.fail("model", "%v: tagged jobs pass through unchanged", err)
			return
		}
		p.ok("model", "%s loads", cfg.ModelPath)
		return
	}
	if _, err := model.Default(); err != nil {
		p.fail("model", "model_path is empty and %v", err)
		return
	}
	p.ok("model", "model_path is empty: %s", modelName(""))
}
