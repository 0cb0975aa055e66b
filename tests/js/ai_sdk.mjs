// Drives the Vercel AI SDK (ai 7, @ai-sdk/openai's chat model) against the
// fake provider, traced as its users trace it: @ai-sdk/otel's integration in
// its GenAI mode (OpenTelemetry) or its legacy one (LegacyOpenTelemetry), with
// OpenTelemetry JS and the undici instrumentation for the fetch calls,
// exporting over OTLP/HTTP (protobuf) to the ledger under test. Each call runs
// under the application's own span, one trace per call; the AI SDK's default
// maxRetries=2 retries on its own.
//
// Usage: node ai_sdk.mjs genai|legacy generateText|streamText OTLP_TRACES_URL PROVIDER_URL PLAN_JSON
// Prints each workflow's outcome as one JSON object. With
// CAPTURE_RATELIMIT_HEADERS=1 the undici instrumentation records the
// providers' rate-limit response headers, as docs/record-format.md shows.

import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';

const [mode, call, otlpUrl, providerUrl, planJson] = process.argv.slice(2);
const plan = JSON.parse(planJson);

const exporter = new OTLPTraceExporter({ url: otlpUrl });
const provider = new TracerProvider({
  resource: resourceFromAttributes({ 'service.name': `ai-sdk-${mode}-test-app` }),
  spanProcessors: [new BatchSpanProcessor({ exporter })],
});
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(provider);
const ratelimitHeaders = ['requests', 'tokens'].flatMap(kind =>
  ['limit', 'remaining', 'reset'].flatMap(what => [
    `x-ratelimit-${what}-${kind}`,
    `anthropic-ratelimit-${kind}-${what}`,
  ]),
);
const undici = process.env.CAPTURE_RATELIMIT_HEADERS === '1'
  ? new UndiciInstrumentation({ headersToSpanAttributes: { responseHeaders: ratelimitHeaders } })
  : new UndiciInstrumentation();
registerInstrumentations({ tracerProvider: provider, instrumentations: [undici] });

// Imported after the instrumentation is registered, as an application does.
const { generateText, streamText, registerTelemetry } = await import('ai');
const { createOpenAI } = await import('@ai-sdk/openai');
const { OpenTelemetry, LegacyOpenTelemetry } = await import('@ai-sdk/otel');

registerTelemetry(mode === 'legacy' ? new LegacyOpenTelemetry() : new OpenTelemetry());
const openai = createOpenAI({ baseURL: `${providerUrl}/v1`, apiKey: 'sk-test' });
const model = openai.chat('gpt-4o-mini');
const tracer = trace.getTracer('ai-sdk-test-app');

const outcomes = {};
for (const name of Object.keys(plan)) {
  await tracer.startActiveSpan(`handle ${name}`, async span => {
    const prompt = `classify wf=${name}`;
    try {
      if (call === 'streamText') {
        const result = streamText({ model, prompt, onError: () => {} });
        await result.consumeStream();
        await result.text;
      } else {
        await generateText({ model, prompt });
      }
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
