"""Model optimisation: NNCF INT8 quantization with an accuracy budget and per-layer sensitivity.

calib       calibration / validation items made by the real pipeline stages
metrics     stage metrics of a model against its FP32 reference, and the accuracy budget
sensitivity per-layer sensitivity (one layer quantized / one layer left FP32), mixed precision
quantize    the `edgegaze optimize quantize` command's library function
"""
