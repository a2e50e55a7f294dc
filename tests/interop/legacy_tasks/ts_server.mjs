// The reference server of the TypeScript SDK's v1 line (@modelcontextprotocol/sdk 1.32.2 with
// zod 4, pinned in tests/interop/npm): its McpServer with the 2025-11-25 tasks utility
// (`taskStore` + `taskMessageQueue`, `experimental.tasks.registerToolTask`), legacy-only,
// written as a user of that SDK would, to show the wire a 2025 task client expects.
//
//     node ts_server.mjs stdio     # one session on stdin/stdout
//     node ts_server.mjs http      # Streamable HTTP, one McpServer per session (the SDK's
//                                  # pattern), on a free loopback port; prints {"ready": URL}
//
// Its three tools (scenario.json), all `execution.taskSupport: "required"`: `slow` sleeps
// `seconds` and answers "<label> done"; `ask` asks its `question` by a form elicitation sent
// with the related-task option, so the SDK marks the task `input_required` and queues the
// request for the `tasks/result` stream, and answers "answer: <the answer>"; `fail` stores
// the tool's `isError` result with status `failed` (the SDK's own example does the same).

import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';

// The SDK lives in tests/interop/npm/node_modules (tests/interop/npm/install).
const require = createRequire(new URL('../npm/package.json', import.meta.url));
const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js');
const { StreamableHTTPServerTransport } = require('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { InMemoryTaskStore, InMemoryTaskMessageQueue } = require(
    '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js'
);
const { isTerminal } = require('@modelcontextprotocol/sdk/experimental/tasks/interfaces.js');
const { ElicitResultSchema } = require('@modelcontextprotocol/sdk/types.js');
const { z } = require('zod');

const SCENARIO = JSON.parse(readFileSync(new URL('./scenario.json', import.meta.url), 'utf8'));
const POLL_INTERVAL_MS = 100; // what tasks/get advises; the SDK's tasks/result re-reads at it

// Shared by every session; the store binds each task to the session that created it.
const taskStore = new InMemoryTaskStore();
const taskMessageQueue = new InMemoryTaskMessageQueue();

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const text = (value, isError = false) => ({ content: [{ type: 'text', text: value }], isError });

const WORK = {
    slow: {
        shape: { seconds: z.number(), label: z.string() },
        run: async ({ seconds, label }) => {
            await sleep(seconds * 1000);
            return text(`${label} done`);
        }
    },
    ask: {
        shape: { question: z.string() },
        run: async ({ question }, extra, taskId) => {
            const requestedSchema = {
                type: 'object',
                properties: { answer: { type: 'string' } },
                required: ['answer']
            };
            const answer = await extra.sendRequest(
                { method: 'elicitation/create', params: { mode: 'form', message: question, requestedSchema } },
                ElicitResultSchema,
                { relatedTask: { taskId } }
            );
            await extra.taskStore.updateTaskStatus(taskId, 'working');
            return text(`answer: ${answer.content?.answer ?? answer.action}`);
        }
    },
    fail: {
        shape: { reason: z.string() },
        run: async ({ reason }) => text(reason, true)
    }
};

function register(server, name) {
    const { shape, run } = WORK[name];
    server.experimental.tasks.registerToolTask(
        name,
        {
            description: SCENARIO.tools[name].description,
            inputSchema: shape,
            execution: { taskSupport: 'required' }
        },
        {
            async createTask(args, extra) {
                const task = await extra.taskStore.createTask({
                    ttl: extra.taskRequestedTtl,
                    pollInterval: POLL_INTERVAL_MS
                });
                (async () => {
                    let result;
                    try {
                        result = await run(args, extra, task.taskId);
                    } catch (error) {
                        result = text(String(error?.message ?? error), true);
                    }
                    const now = await extra.taskStore.getTask(task.taskId);
                    if (now && !isTerminal(now.status)) {
                        await extra.taskStore.storeTaskResult(
                            task.taskId,
                            result.isError ? 'failed' : 'completed',
                            result
                        );
                    }
                })().catch(error => process.stderr.write(`task ${task.taskId}: ${error}\n`));
                return { task };
            },
            async getTask(_args, extra) {
                return await extra.taskStore.getTask(extra.taskId);
            },
            async getTaskResult(_args, extra) {
                return await extra.taskStore.getTaskResult(extra.taskId);
            }
        }
    );
}

function build() {
    const server = new McpServer(
        { name: 'ts-sdk-1.32-tasks', version: '1.0.0' },
        {
            capabilities: { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
            taskStore,
            taskMessageQueue
        }
    );
    for (const name of Object.keys(WORK)) {
        register(server, name);
    }
    return server;
}

async function serveHttp() {
    const sessions = new Map();
    const http = createServer(async (request, response) => {
        const sessionId = request.headers['mcp-session-id'];
        let transport = sessionId === undefined ? undefined : sessions.get(sessionId);
        if (transport === undefined) {
            if (sessionId !== undefined || request.method !== 'POST') {
                response.writeHead(sessionId === undefined ? 400 : 404).end();
                return;
            }
            transport = new StreamableHTTPServerTransport({
                sessionIdGenerator: () => randomUUID(),
                onsessioninitialized: id => sessions.set(id, transport)
            });
            transport.onclose = () => sessions.delete(transport.sessionId);
            await build().connect(transport);
        }
        await transport.handleRequest(request, response);
    });
    http.listen(0, '127.0.0.1', () => {
        const { port } = http.address();
        process.stdout.write(JSON.stringify({ ready: `http://127.0.0.1:${port}/mcp` }) + '\n');
    });
}

if (process.argv[2] === 'stdio') {
    await build().connect(new StdioServerTransport());
} else {
    await serveHttp();
}
