// The official TypeScript MCP SDK as a client of wontopos-mcp over stdio: lists and reads
// the prompts and the resources, and prints what it received as one JSON object on stdout.
// Usage: node client.mjs COMMAND [ARG...]   (the server to spawn; tests/mcp/test_ts_client.py)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "wontopos-ts-client-test", version: "0.0.0" });
await client.connect(transport);

const seen = { server: client.getServerVersion(), capabilities: client.getServerCapabilities() };
seen.prompts = (await client.listPrompts()).prompts;
seen.gotPrompts = {
  recall_first: await client.getPrompt({ name: "recall_first" }),
  remember_conversation: await client.getPrompt({ name: "remember_conversation" }),
  about_person: await client.getPrompt({ name: "about_person", arguments: { speaker: "Bob" } }),
};
seen.resources = (await client.listResources()).resources;
seen.templates = (await client.listResourceTemplates()).resourceTemplates;
seen.reads = {};
for (const uri of ["memory://stores", "memory://default/speakers", "memory://default/speakers/Bob", "memory://default/stats"]) {
  seen.reads[uri] = await client.readResource({ uri });
}
try {
  await client.readResource({ uri: "memory://default/speakers/Nobody" });
  seen.unknown = null;
} catch (error) {
  seen.unknown = { code: error.code, data: error.data ?? null };
}
await client.close();
process.stdout.write(JSON.stringify(seen));
