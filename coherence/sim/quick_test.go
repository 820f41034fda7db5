package sim

import "testing"

func TestQuick(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		cfg := DefaultConfig(seed)
		cfg.Ops = 5000
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v", res.Stats)
		if v := Check(res); v != nil {
			t.Error(v)
		}
	}
}
