"""The local runtime behind ``durable dev``: the serverless stack on one machine.

Nothing local runs Lambda code or fires EventBridge Scheduler schedules, so this package
does both: worker processes with a Lambda-like context and deadline, an HTTP server that
turns requests into API Gateway events (and answers the Lambda Invoke API for the
worker's self-invocations), a timer loop over the schedules the app created, and the
sweeper. Storage is DynamoDB Local (moto server when Java is missing).
"""
