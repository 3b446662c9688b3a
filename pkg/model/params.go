// SPDX-License-Identifier: Apache-2.0

package model

// Params are the training settings, stored in the model file. Package training
// fits a model with them (training.DefaultParams, training.Validate); this
// package only records and prints them.
type Params struct {
	// MaxDepth is the most splits on any root-to-leaf path.
	MaxDepth int `codec:"max_depth" json:"max_depth"`
	// MinLeaf is the fewest training samples a leaf may hold.
	MinLeaf int `codec:"min_leaf" json:"min_leaf"`
	// Trees is 1 for a single tree, more for a bagged forest (bootstrap samples,
	// predictions averaged).
	Trees int `codec:"trees" json:"trees"`
	// Bins bounds the split candidates golearn is offered per feature and node
	// (equal-frequency bins of the node's samples); 0 offers every distinct value,
	// which is golearn's own behaviour.
	Bins int `codec:"bins" json:"bins"`
	// MaxFeatures, when > 0 in a forest, offers golearn only that many randomly
	// chosen features at each node (random-forest style decorrelation).
	MaxFeatures int `codec:"max_features" json:"max_features"`
	// Seed drives the forest's bootstrap samples and feature choices.
	Seed int64 `codec:"seed" json:"seed"`

	// Features names the features golearn may split on (nil: all of
	// FeatureNames). The model still computes every feature; see docs/model.md
	// for why the default model offers only the SM-utilization ones.
	Features []string `codec:"features" json:"features,omitempty"`
}
