package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints results as an aligned table, one line per result.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\top\tsystem\tclients\tops/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\tops\terrors\tsecs\t% echo\tdriver µs/op\tserver µs/op\t")
	for _, r := range results {
		op := r.Op
		if r.HotDir {
			op += "(hot)"
		}
		echo := "-"
		if r.EchoFraction > 0 {
			echo = fmt.Sprintf("%.1f", 100*r.EchoFraction)
		}
		driver, server := "-", "-"
		if r.DriverCPUUsPerOp > 0 {
			driver = fmt.Sprintf("%.1f", r.DriverCPUUsPerOp)
		}
		if r.Server != nil && r.Ops > 0 && !r.Server.SharedProcess {
			server = fmt.Sprintf("%.1f", r.Server.CPUUsPerOp)
		}
		l := r.Latency
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%d\t%d\t%.1f\t%s\t%s\t%s\t\n",
			r.Workload, op, r.System, r.Clients, r.ThroughputOpsS, l.P50, l.P90, l.P99, l.P999, l.Max, r.Ops, r.Errors, r.DurationS, echo, driver, server)
	}
	return tw.Flush()
}
