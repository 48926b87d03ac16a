"""The one attention: multi-head attention in the paper's steps (mha.py) on scaled dot-product attention's
(dot_product.py), the parts a family's attention is built with (qkv.py), the named implementations that turn
scores into outputs (implementations.py, by_head.py) and the requests that choose them (request.py), the masks
(masks.py) and rotary positions (rotary.py). The models (attention/models/) are built from it."""
