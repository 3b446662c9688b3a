// SPDX-License-Identifier: Apache-2.0

// Command coscheml-node is the node side of coscheml: the Slurm Prolog and Epilog
// entry points (GPU residency and profiling), the residency reconciler, the
// detached NVML sampler and the detached finisher that keeps a job's run only
// once the controller says it COMPLETED.
//
//	coscheml-node prolog    [--config FILE]        (Prolog=, run by slurmd)
//	coscheml-node epilog    [--config FILE]        (Epilog=, run by slurmd)
//	coscheml-node reconcile [--config FILE] [--grace D] [--live FILE|-]
//	coscheml-node sampler   ARGS...                (started by the prolog)
//	coscheml-node finish    --pending FILE         (started by the epilog)
//	coscheml-node guard     [--config FILE] [--node NAME]  (coscheml-guard.service)
//
// Prolog and epilog never fail a job because of coscheml: they always exit 0 and
// report problems on stderr and to syslog.
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/coscheml/coscheml/pkg/version"
)

const usage = `usage: coscheml-node prolog|epilog [--config FILE] [--timeout D] [--no-syslog]
       coscheml-node reconcile [--config FILE] [--grace D] [--live FILE|-]
       coscheml-node sampler ARGS...
       coscheml-node finish [--config FILE] [--wait D] --pending FILE
       coscheml-node guard [--config FILE] [--node NAME] [--no-syslog]
       coscheml-node --version`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "prolog", "epilog":
		os.Exit(runHook(os.Args[1], args, os.Environ(), time.Now))
	case "reconcile":
		os.Exit(runReconcile(args, os.Stdin, os.Stdout, os.Stderr, time.Now()))
	case "sampler":
		os.Exit(runSampler(args))
	case "finish":
		os.Exit(runFinish(args, os.Stderr))
	case "guard":
		os.Exit(runGuard(args, os.Stderr))
	case "-h", "--help", "help":
		fmt.Println(usage)
	case "-v", "--version", "version":
		fmt.Println("coscheml-node version", version.String())
	default:
		fmt.Fprintf(os.Stderr, "coscheml-node: unknown command %q\n%s\n", os.Args[1], usage)
		os.Exit(2)
	}
}
