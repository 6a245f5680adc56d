// Command scorer is the model server the end-to-end endpoint tests deploy: it serves the
// enginetest scorer on $PORT (see that package for its routes).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest/scorer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := scorer.Serve(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "scorer:", err)
		os.Exit(1)
	}
}
