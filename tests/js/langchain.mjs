// Drives LangChain.js (a prompt | ChatOpenAI chain over the openai SDK)
// traced by Arize OpenInference's LangChain instrumentation, whose tracer
// starts its spans from callbacks and never makes them current, with
// OpenTelemetry JS's undici instrumentation for the SDK's fetch calls,
// exporting over OTLP/HTTP (protobuf) to the ledger under test. With `sdk`,
// OpenInference's openai instrumentation runs beside it. LangChain.js
// retries itself (`maxRetries: 2`, its AsyncCaller) around an SDK it builds
// with `maxRetries: 0`: each retry is a new SDK call. Each workflow runs under
// the application's own span, one trace per workflow.
//
// Usage: node langchain.mjs sdk|no-sdk OTLP_TRACES_URL PROVIDER_URL PLAN_JSON
// Prints each workflow's outcome as one JSON object.

import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { LangChainInstrumentation } from '@arizeai/openinference-instrumentation-langchain';
import { OpenAIInstrumentation } from '@arizeai/openinference-instrumentation-openai';

const [sdk, otlpUrl, providerUrl, planJson] = process.argv.slice(2);
const plan = JSON.parse(planJson);

const exporter = new OTLPTraceExporter({ url: otlpUrl });
const provider = new TracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'langchain-js-test-app' }),
  spanProcessors: [new BatchSpanProcessor({ exporter })],
});
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(provider);
registerInstrumentations({ tracerProvider: provider, instrumentations: [new UndiciInstrumentation()] });

// ES modules are not patched on import: both instrumentations are applied
// by hand, as their READMEs show for ESM applications.
const callbackManager = await import('@langchain/core/callbacks/manager');
new LangChainInstrumentation({ tracerProvider: provider }).manuallyInstrument(callbackManager);
if (sdk === 'sdk') {
  const openai = await import('openai');
  new OpenAIInstrumentation({ tracerProvider: provider }).manuallyInstrument(openai);
}
const { ChatPromptTemplate } = await import('@langchain/core/prompts');
const { ChatOpenAI } = await import('@langchain/openai');

const llm = new ChatOpenAI({
  model: 'gpt-4o-mini',
  apiKey: 'sk-test',
  configuration: { baseURL: `${providerUrl}/v1` },
  maxRetries: 2,
});
const chain = ChatPromptTemplate.fromMessages([['user', 'classify wf={name}']]).pipe(llm);
const tracer = trace.getTracer('langchain-js-test-app');

const outcomes = {};
for (const name of Object.keys(plan)) {
  await tracer.startActiveSpan(`handle ${name}`, async span => {
    try {
      await chain.invoke({ name });
      outcomes[name] = 'ok';
    } catch (error) {
      outcomes[name] = error?.name ?? 'error';
    } finally {
      span.end();
    }
  });
}
await provider.forceFlush();
await provider.shutdown();
console.log(JSON.stringify(outcomes));
