// SPDX-License-Identifier: Apache-2.0

// Package training fits the interference models that package model loads and
// evaluates: Train grows a regression tree or a bagged forest (the splits chosen
// by golearn's CART regressor), and KFold and LeaveAppsOut cross-validate it.
//
// It is kept apart from package model so that programs that only load a model
// and predict with it (the Slurm plugin library, the scheduler) do not link
// golearn, gonum and their dependencies.
package training
