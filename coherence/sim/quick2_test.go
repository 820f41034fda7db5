package sim

import "testing"

func TestQuickNeg(t *testing.T) {
	for _, knob := range []string{"inv", "fill", "fence"} {
		found := 0
		for seed := uint64(1); seed <= 5; seed++ {
			cfg := DefaultConfig(seed)
			cfg.Ops = 5000
			switch knob {
			case "inv":
				cfg.DisableInvalidation = true
			case "fill":
				cfg.DisableFillCheck = true
			case "fence":
				cfg.DisableFencing = true
				cfg.WritesPerMille = 100
			}
			res, _ := Run(cfg)
			if v := Check(res); v != nil {
				found++
				if found == 1 {
					t.Logf("%s: %s", knob, v)
				}
			}
		}
		t.Logf("%s: %d of 5 seeds", knob, found)
	}
}
