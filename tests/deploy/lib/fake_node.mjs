// The agent as the Node end-to-end tests run it on a fake node: its config in <tmp>/agent.yaml,
// listening on a free port, its rings in `ringDir` (made here), the fake NVML's state file in
// FAKE_NVML_STATE. `sections` is the config: the plugin section adds to `pluginSection`'s, eBPF is
// off unless the test says otherwise.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { startAgent } from "../agent.mjs";
import { freePort } from "../prometheus.mjs";

// Rings read every 50 ms with every kernel and proxy event recorded.
export const pluginSection = (ringDir) => ({ ring_dir: ringDir, poll_interval: "50ms", kernel_duty_cycle: 1, proxy_duty_cycle: 1 });

// Returns { agent (startAgent's process), port }.
export async function startFakeNodeAgent(agentBin, { tmp, ringDir, nvmlState, config }) {
  const port = await freePort();
  mkdirSync(ringDir);
  const agent = await startAgent(agentBin, {
    port,
    configPath: join(tmp, "agent.yaml"),
    config: { ebpf: { enabled: false }, ...config, plugin: { ...pluginSection(ringDir), ...config.plugin } },
    env: { ...process.env, FAKE_NVML_STATE: nvmlState },
  });
  return { agent, port };
}
