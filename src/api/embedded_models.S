/* The AWS service models, embedded as read-only data. */
    .section .rodata
    .global ty_batch_model_begin
    .global ty_batch_model_end
    .global ty_sagemaker_model_begin
    .global ty_sagemaker_model_end
    .balign 16
ty_batch_model_begin:
    .incbin "batch-2016-08-10.json"
ty_batch_model_end:
    .byte 0
    .balign 16
ty_sagemaker_model_begin:
    .incbin "sagemaker-2017-07-24.json"
ty_sagemaker_model_end:
    .byte 0
    .section .note.GNU-stack,"",@progbits
