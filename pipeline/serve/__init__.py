"""`edgegaze serve`: a webcam as an eye tracker for the software labs already use.

The record stream (`records.py`: GazeStream, one GazeSample per frame; the Python API's
`pipeline.gaze_stream`) is served over Gazepoint's Open Gaze API (`opengaze.py` the text,
`handlers.py` the commands, `calibrate.py` the client-driven calibration, `server.py` the asyncio
server, `state.py` its state) and, with --lsl, as Lab Streaming Layer outlets (`lsl.py`).
`service.py` runs them together; `options.py` declares the options. docs/serve.md is the guide.
"""
