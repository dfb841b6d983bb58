// The real ncclscope-agent binary for the Node end-to-end tests: its config written to a file
// (JSON, which the agent's YAML parser reads) with the listen address on `port`, started, and
// waited for until it serves /metrics. One way for every test to start it.
import { writeFileSync } from "node:fs";
import { sleep, startProcess } from "./prometheus.mjs";

// Returns the process (startProcess's: stop(), exited(), log()). Throws with the agent's log when
// it exits or does not serve /metrics within 20 s, after stopping it.
export async function startAgent(binary, { port, configPath, config, env = process.env }) {
  const withAddress = { ...config, server: { ...(config.server ?? {}), listen_address: `127.0.0.1:${port}` } };
  writeFileSync(configPath, JSON.stringify(withAddress, null, 2));
  const agent = startProcess(binary, ["--config", configPath], { env });
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/metrics`)).ok) return agent;
    } catch { /* not listening yet */ }
    if (agent.exited() || i > 200) {
      await agent.stop();
      throw new Error(`agent did not serve /metrics:\n${agent.log()}`);
    }
    await sleep(100);
  }
}
