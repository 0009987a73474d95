package agent

import "testing"

// Captured from real machines (nvidia-smi --query-gpu=index,name,memory.total,uuid --format=csv,noheader,nounits).
func TestParseNvidiaSMI(t *testing.T) {
	cases := map[string]struct {
		out   string
		count int
		typ   string
		vram  float64
	}{
		"a100x2":    {"0, NVIDIA A100-SXM4-80GB, 81920, GPU-5c1f8a2e-1111-2222-3333-444455556666\n1, NVIDIA A100-SXM4-80GB, 81920, GPU-9d2e7b3f-1111-2222-3333-444455556666\n", 2, "nvidia-a100-sxm4-80gb", 80},
		"t4":        {"0, Tesla T4, 15360, GPU-0a1b2c3d-aaaa-bbbb-cccc-ddddeeeeffff\n", 1, "nvidia-tesla-t4", 15},
		"l4":        {"0, NVIDIA L4, 23034, GPU-11111111-2222-3333-4444-555555555555", 1, "nvidia-l4", 22.5},
		"h100":      {"0, NVIDIA H100 80GB HBM3, 81559, GPU-aaaa\n", 1, "nvidia-h100-80gb-hbm3", 79.6},
		"a10g":      {"0, NVIDIA A10G, 23028, GPU-8f1d0c3a-0000-1111-2222-333344445555\n", 1, "nvidia-a10g", 22.5},
		"rtx4090x2": {"0, NVIDIA GeForce RTX 4090, 24564, GPU-01\n1, NVIDIA GeForce RTX 4090, 24564, GPU-02\n", 2, "nvidia-geforce-rtx-4090", 24},
		"empty":     {"", 0, "", 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			gpus, err := ParseNvidiaSMI(tc.out)
			if err != nil {
				t.Fatal(err)
			}
			if len(gpus) != tc.count {
				t.Fatalf("got %d GPUs", len(gpus))
			}
			if tc.count > 0 && (gpus[0].Type != tc.typ || gpus[0].VRAMGB != tc.vram) {
				t.Fatalf("got %+v", gpus[0])
			}
		})
	}
	for _, bad := range []string{"x, A100, 1", "0, A100", "0, A100, lots"} {
		if _, err := ParseNvidiaSMI(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
