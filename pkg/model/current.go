// SPDX-License-Identifier: Apache-2.0

package model

// DefaultModelName names the default model in messages: the model the plugin
// loads when the configuration's model_path is empty.
const DefaultModelName = "the default model (model_path is empty)"

// Current loads the model the plugin uses under a configuration whose
// model_path is path: that file, or the default model (Default) when path is
// "". name says which, for messages. Every program that must agree with the
// plugin on "the current model" (the CLI, retrain) resolves it here.
func Current(path string) (m *Model, name string, err error) {
	if path == "" {
		m, err = Default()
		return m, DefaultModelName, err
	}
	m, err = Load(path)
	return m, path, err
}
