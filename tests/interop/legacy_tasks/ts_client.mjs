// The TypeScript SDK's v1 client (@modelcontextprotocol/sdk 1.32.2 with zod 4, pinned in
// tests/interop/npm) as a 2025-11-25 task client: `client.experimental.tasks` through the
// steps of tasks_scenario.py, against the server given on the command line.
//
//     node ts_client.mjs stdio CMD ARG...    # spawns CMD with the SDK's StdioClientTransport
//     node ts_client.mjs http URL            # the SDK's StreamableHTTPClientTransport
//
// How its API goes about it: `callToolStream` (with the task option) creates the task
// (`taskCreated`), polls tasks/get at the task's pollInterval (`taskStatus`, each one a
// `polled` record), and reads tasks/result once the task is `completed`, or at once when it
// is `input_required` (the blocking read the question arrives on); for a `failed` or
// `cancelled` task it skips tasks/result and yields a local -32603 (`fail.stream_error`),
// so the driver then reads tasks/result itself with `getTaskResult`. The `cancel` stream is
// left after `taskCreated`; `cancelTask`, `getTask` and `listTasks` are called directly.
// Prints the summary tests/interop/legacy_tasks/_driver.py describes.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

// The SDK lives in tests/interop/npm/node_modules (tests/interop/npm/install).
const require = createRequire(new URL('../npm/package.json', import.meta.url));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const {
    CallToolResultSchema,
    ElicitRequestSchema,
    GetTaskPayloadResultSchema,
    TaskStatusNotificationSchema
} = require('@modelcontextprotocol/sdk/types.js');

const SCENARIO = JSON.parse(readFileSync(new URL('./scenario.json', import.meta.url), 'utf8'));
const { calls: CALLS, answer: ANSWER, ttl_ms: TTL_MS } = SCENARIO;
const STEP_MS = SCENARIO.step_seconds * 1000;
const RELATED_TASK = 'io.modelcontextprotocol/related-task';
const OPTIONS = { timeout: STEP_MS };

const summary = { client: 'ts-sdk 1.32.2', questions: [], status_notifications: [] };
let awaitingResult = null; // the task whose tasks/result is outstanding

function describe(error) {
    return {
        type: error?.constructor?.name ?? typeof error,
        message: String(error?.message ?? error),
        code: typeof error?.code === 'number' ? error.code : null
    };
}

function taskRecord(task) {
    return {
        task_id: task.taskId ?? null,
        status: task.status ?? null,
        status_message: task.statusMessage ?? null,
        ttl: task.ttl ?? null,
        poll_interval: task.pollInterval ?? null,
        timestamps: Boolean(task.createdAt) && Boolean(task.lastUpdatedAt)
    };
}

function resultRecord(result) {
    return {
        is_error: Boolean(result.isError),
        text: (result.content ?? []).filter(block => typeof block.text === 'string').map(block => block.text),
        related_task: result._meta?.[RELATED_TASK]?.taskId ?? null,
        keys: Object.keys(result)
            .filter(key => key !== '_meta' && result[key] !== undefined && result[key] !== null)
            .sort()
    };
}

async function step(name, run) {
    const record = {};
    summary[name] = record;
    let timer;
    const timeout = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`step ${name} took over ${STEP_MS} ms`)), STEP_MS);
    });
    try {
        await Promise.race([run(record), timeout]);
    } catch (error) {
        record.error = describe(error);
    } finally {
        clearTimeout(timer);
    }
}

// Run `call`'s task through callToolStream into `record`; stop after `taskCreated` if `leave`.
async function stream(client, call, record, leave = false) {
    const { tool, arguments: args } = CALLS[call];
    record.polled = [];
    const messages = client.experimental.tasks.callToolStream(
        { name: tool, arguments: args },
        CallToolResultSchema,
        { ...OPTIONS, task: { ttl: TTL_MS } }
    );
    for await (const message of messages) {
        if (message.type === 'taskCreated') {
            record.created = taskRecord(message.task);
            if (leave) {
                return record.created.task_id;
            }
        } else if (message.type === 'taskStatus') {
            record.polled.push(taskRecord(message.task));
            if (message.task.status === 'input_required') {
                awaitingResult = message.task.taskId; // the stream's next call: tasks/result
            }
        } else if (message.type === 'result') {
            awaitingResult = null;
            record.result = resultRecord(message.result);
        } else if (message.type === 'error') {
            awaitingResult = null;
            record.stream_error = describe(message.error);
        }
    }
    return record.created?.task_id;
}

async function run(client) {
    const tasks = client.experimental.tasks;
    await step('connect', async record => {
        const tools = await client.listTools(undefined, OPTIONS);
        record.protocol_version = negotiated;
        record.tasks = client.getServerCapabilities()?.tasks ?? null;
        record.task_support = Object.fromEntries(
            tools.tools.map(tool => [tool.name, tool.execution?.taskSupport ?? null])
        );
    });
    await step('slow', async record => {
        const taskId = await stream(client, 'slow', record);
        record.after = taskRecord(await tasks.getTask(taskId, OPTIONS));
    });
    await step('cancel', async record => {
        const taskId = await stream(client, 'cancel', record, true);
        record.cancelled = taskRecord(await tasks.cancelTask(taskId, OPTIONS));
        record.after = taskRecord(await tasks.getTask(taskId, OPTIONS));
        // what a cancelled task's tasks/result carries is not defined: read it unparsed
        record.result = resultRecord(await tasks.getTaskResult(taskId, GetTaskPayloadResultSchema, OPTIONS));
    });
    await step('ask', async record => {
        const taskId = await stream(client, 'ask', record);
        record.after = taskRecord(await tasks.getTask(taskId, OPTIONS));
    });
    await step('fail', async record => {
        const taskId = await stream(client, 'fail', record);
        awaitingResult = taskId;
        try {
            record.result = resultRecord(await tasks.getTaskResult(taskId, CallToolResultSchema, OPTIONS));
        } finally {
            awaitingResult = null;
        }
        record.after = taskRecord(await tasks.getTask(taskId, OPTIONS));
    });
    await step('list', async record => {
        const listed = await tasks.listTasks(undefined, OPTIONS);
        record.ids = listed.tasks.map(task => task.taskId);
        record.statuses = Object.fromEntries(listed.tasks.map(task => [task.taskId, task.status]));
        record.next_cursor = listed.nextCursor ?? null;
    });
}

let negotiated = null; // the protocol version initialize agreed on

function transport(argv) {
    const opened =
        argv[0] === 'http'
            ? new StreamableHTTPClientTransport(new URL(argv[1]))
            : new StdioClientTransport({ command: argv[1], args: argv.slice(2), env: process.env, stderr: 'inherit' });
    // The client hands the negotiated version to a transport that takes one (HTTP's header);
    // it has no getter of its own, so every transport takes it here.
    const setProtocolVersion = opened.setProtocolVersion?.bind(opened);
    opened.setProtocolVersion = version => {
        negotiated = version;
        setProtocolVersion?.(version);
    };
    return opened;
}

const client = new Client({ name: 'ts-legacy-tasks', version: '1.0.0' }, { capabilities: { elicitation: {} } });
client.setRequestHandler(ElicitRequestSchema, async request => {
    const params = request.params;
    summary.questions.push({
        method: request.method,
        message: params.message ?? null,
        fields: Object.keys(params.requestedSchema?.properties ?? {}).sort(),
        related_task: params._meta?.[RELATED_TASK]?.taskId ?? null,
        during_result: awaitingResult
    });
    return { action: 'accept', content: { answer: ANSWER } };
});
client.setNotificationHandler(TaskStatusNotificationSchema, notification => {
    summary.status_notifications.push([notification.params.taskId, notification.params.status]);
});

try {
    await client.connect(transport(process.argv.slice(2)), OPTIONS);
    await run(client);
} catch (error) {
    summary.error = describe(error);
} finally {
    process.stdout.write(JSON.stringify(summary) + '\n');
    await client.close().catch(() => {});
}
process.exit(0);
